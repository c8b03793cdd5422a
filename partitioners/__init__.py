"""Key partitioners: hash, shuffle, PKG, D-/W-Choices, CG, CAPA/E-CAPA, Dalton, Prompt, table."""
