"""Time series beyond the papers: the sequence presets on UEA/UCR archive files."""
