"""pretrained: the public checks of notebook 11, one module per part (`checkpoint`, `cache`, `lora`, `features`)."""
