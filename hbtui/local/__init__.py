"""The local model: llama.cpp's server and SmolLM2, installed once, and the demo's use of them."""

# The name the demo's runs give the local model (for both roles): what the monitor knows it by.
DEMO_MODEL_ALIAS = "smollm2-135m-demo"
