"""Production: daily exports of the game backend's database and their datasets (DESIGN 12.1)."""
