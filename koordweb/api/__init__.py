"""The REST API under /api/v1/: serializers validate, one service acts, a serializer answers."""
