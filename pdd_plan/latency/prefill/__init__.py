"""The prefill pool's wait: GI/G/1 exact (Lindley), GI/G/c (Tijms), service times per class."""
