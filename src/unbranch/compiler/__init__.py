"""The compiler: a function's source in, its rewritten source out (parse, normalise, rules, emit).

It never imports the loading, the export session or the integrations above it.
"""
