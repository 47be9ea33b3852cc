"""The local model: llama.cpp's server and SmolLM2, installed once, and the demo's use of them."""
