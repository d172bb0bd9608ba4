# GPU tests (exit 77 without a usable CUDA device)
