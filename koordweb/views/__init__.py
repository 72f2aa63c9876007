"""HTML pages for admins and tenants: views read through selectors and draw with figures."""
