"""Input serializers validate request bodies; output serializers shape responses."""
