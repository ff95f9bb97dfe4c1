"""The shipped serving profiles the serving tests use, and their figures written out by hand
from the data files and docs/serving.md (so that expected values do not go through the
code under test)."""

from __future__ import annotations

from tandem.sim.serving import gpu_profile, model_profile

L70 = model_profile("llama-3.1-70b")
L8 = model_profile("llama-3.1-8b")
H100 = gpu_profile("h100-sxm")
H200 = gpu_profile("h200-sxm")

# H100 SXM: 989.4 TFLOPS dense BF16 x MFU 0.5; 3.35 TB/s x MBU 0.7; 80 GB x 0.9 usable
H100_FLOPS = 989.4e12 * 0.5
H100_BYTES_PER_S = 3.35e12 * 0.7
W70 = 70553706496 * 2  # llama-3.1-70b bf16 weight bytes
KV70 = 2 * 80 * 8 * 128 * 2  # bytes per token: K and V x layers x KV heads x head size x bf16
