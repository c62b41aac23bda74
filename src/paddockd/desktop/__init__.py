"""The box desktop from the host's side: an RFB client for screenshots and resizing, PNG
encoding, signed desktop links, and the view-only filter of the browser bridge."""
