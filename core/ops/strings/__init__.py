"""``tv.strings``: the string ops under ``tf.strings`` names (defined in string_ops).

``tv.strings.split`` follows ``tf.strings.split`` (``sep`` a whole string, None for runs of
whitespace) and, like ``tv.string_split``, returns dense ``(tokens, row_ids)`` instead of a
ragged or sparse tensor.

>>> import tensorvm as tv
>>> from tensorvm.ops import strings  # tv.strings once the package imports it
>>> with tv.Session() as s: s.run(strings.lower(["AbC"]))
array(['abc'], dtype=object)
"""
from .string_ops import as_string
from .string_ops import regex_full_match, regex_replace
from .string_ops import string_join as join
from .string_ops import string_length as length
from .string_ops import string_lower as lower
from .string_ops import string_strip as strip
from .string_ops import string_to_hash_bucket as to_hash_bucket
from .string_ops import string_to_hash_bucket_fast as to_hash_bucket_fast
from .string_ops import string_to_number as to_number
from .string_ops import string_upper as upper
from .string_ops import strings_split as split
from .string_ext_ops import reduce_join, substr

__all__ = ["as_string", "join", "length", "lower", "reduce_join", "regex_full_match",
           "regex_replace", "split", "strip", "substr", "to_hash_bucket", "to_hash_bucket_fast",
           "to_number", "upper"]
