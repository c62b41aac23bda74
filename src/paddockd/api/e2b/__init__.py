"""E2B's API over Paddock's services: the control plane, and envd's REST and Connect
calls (docs/e2b.md)."""
