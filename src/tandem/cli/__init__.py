"""The `tandem` command line: reads files, calls the pure core, prints results."""
