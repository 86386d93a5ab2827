"""The demos: ``floodmark demo`` (``main``), the Spark pipeline on a local cluster (``pipeline``),
the live single-broker tour (``live``) and the live cluster tour (``cluster``)."""
