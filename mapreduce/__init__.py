"""``tensorvm.mapreduce``: map-reduce jobs built as tensorvm graphs (inputs → map → combine →
partition → shuffle through Send/Recv → reduce → committed output). See DESIGN.md
"Map-reduce"; the API lands with its own issue."""
