"""Cross-cutting helpers: errors, atomic writes, the limits on every size a user controls."""
