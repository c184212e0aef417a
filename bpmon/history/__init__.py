"""The history of runs: a Parquet store and the Spark jobs over it (the only pyspark importer).

May import: the model layer only.
"""
