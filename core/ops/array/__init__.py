"""Array op families: constants and placeholders, shapes, slicing, gather/scatter, sort."""
