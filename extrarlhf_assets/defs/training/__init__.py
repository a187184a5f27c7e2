"""Training: behaviour cloning -> benchmark against the incumbent -> promotion (DESIGN section 11)."""
