"""pretrained: the hidden checks of notebook 11, one module per part (`checkpoint`, `cache`, `lora`, `features`) and the trained review probe."""
