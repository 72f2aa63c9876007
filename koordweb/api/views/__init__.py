"""API views: thin classes that validate with a serializer, call one service, answer."""
