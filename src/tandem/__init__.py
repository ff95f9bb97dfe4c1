"""tandem: prefill/decode-disaggregated LLM inference placed, rolled out and scaled as one thing."""

__version__ = "0.1.0"
