"""Built-in catalogs: accelerators (devices.py) and public model architectures (models.py), offline."""
