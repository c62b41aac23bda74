"""The E2B facade's use cases over Paddock's own services: sandboxes, their listing,
snapshots, processes and watches."""
