"""bitwise-reuse-audit: can an existing kernel be reused bit for bit?"""
