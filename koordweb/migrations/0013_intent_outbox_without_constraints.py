"""Intents keep their references without database constraints or single-column indexes.

An intent lives from its plan's commit to its enact: the table stays small, and the foreign-key
checks at commit (three row look-ups and locks per intent) were a third of the commit of a round
binding 5,000 pods. The ORM's cascades still delete a pod's or a cluster's intents with it.
"""

import django.db.models.deletion
from django.db import migrations, models


class Migration(migrations.Migration):

    dependencies = [
        ('koordweb', '0012_model_names'),
    ]

    operations = [
        migrations.AlterField(
            model_name='intent',
            name='cluster',
            field=models.ForeignKey(db_constraint=False, db_index=False, on_delete=django.db.models.deletion.CASCADE, related_name='intents', to='koordweb.cluster'),
        ),
        migrations.AlterField(
            model_name='intent',
            name='pod',
            field=models.ForeignKey(db_constraint=False, db_index=False, on_delete=django.db.models.deletion.CASCADE, related_name='intents', to='koordweb.pod'),
        ),
        migrations.AlterField(
            model_name='intent',
            name='round',
            field=models.ForeignKey(blank=True, db_constraint=False, db_index=False, null=True, on_delete=django.db.models.deletion.SET_NULL, related_name='intents', to='koordweb.round'),
        ),
    ]
