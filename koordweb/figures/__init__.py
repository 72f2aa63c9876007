"""Pure plotly figure builders: data in, figure out; no ORM, no request."""
