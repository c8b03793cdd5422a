"""spark_adapter package."""
