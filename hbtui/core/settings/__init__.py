"""The settings: each described once (config), their kinds, presets, prices, .env, their docs."""
