"""Operations: what tells the people running the deployment that something went wrong (DESIGN 12.2)."""
