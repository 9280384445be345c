"""Every output format (terminal table, JSON, CSV, workbook, HTML); no analysis."""
