"""Who may administer the gateway and what they changed: organisations, teams, users and
memberships (`service`), the hash-chained audit log (`audit`), and sign-in to the admin
page with an OpenID provider (`signin`, `oidc`)."""
