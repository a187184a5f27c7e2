"""Collection: session groups on disk (DESIGN section 6) as the partitions of ``battle_sessions``."""
