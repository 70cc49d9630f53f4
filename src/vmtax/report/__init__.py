"""Reports: terminal tables, JSON documents, progress.  One module per
output format; all of them read Measurements and Comparisons."""
