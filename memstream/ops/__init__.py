"""Operations on a running pipeline: re-driving dead letters and the maintenance worker."""
