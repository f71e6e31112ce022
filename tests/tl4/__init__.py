"""The TransformerBridge backend's tests (TransformerLens 4; `make test-tl4`)."""
