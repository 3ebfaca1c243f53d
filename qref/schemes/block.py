"""Block quantization schemes (placeholder: this family registers itself here when it lands)."""
