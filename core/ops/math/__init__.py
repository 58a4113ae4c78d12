"""Math op families: element-wise math, matmul, reductions, linear algebra, special
functions, random ops, clipping."""
