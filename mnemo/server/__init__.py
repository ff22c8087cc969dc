"""mnemo's network surfaces: the MCP server (`mcp`) and the HTTP service (`http`, with its `tenants`).

Nothing is imported here, so using one surface never needs the other's packages.
"""
