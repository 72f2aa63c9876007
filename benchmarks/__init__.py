"""Speed and quality benchmarks; each writes its section of docs/benchmarks.md."""
