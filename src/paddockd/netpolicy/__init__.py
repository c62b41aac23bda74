"""Box network rules: Paddock's own nftables table (NAT, metadata block; policies next)."""
