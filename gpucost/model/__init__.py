"""The cost model: throughput across GPUs and node counts, memory fit, setup times, fabrics,
spot and storage economics, as pure functions over numbers and columns."""
