"""The pipeline's decisions as plain functions, tested without Faust or any provider."""
