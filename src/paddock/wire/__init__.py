"""The wire contract between paddockd and every client (SDKs, CLI, dashboard): `models`
(requests, answers and their option sets), `frames` (the exec stream's framing), `errors`
(the error tree, each class with its code and HTTP status). paddockd
imports these as the clients do, and the OpenAPI spec is generated from them; nothing here
imports more than the standard library, so a client pays only for what it reads."""
