"""The history of runs: a Parquet store and the Spark jobs over it (the only pyspark importer)."""
