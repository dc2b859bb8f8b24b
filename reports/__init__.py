"""Report schema (pydantic), atomic JSON reading and writing, and rendering."""
