"""The UI tests' auth manager: Airflow's SimpleAuthManager (its login page, tokens and roles, unchanged)
plus per-DAG grants, the shape of what FAB's or Keycloak's auth managers give a user: a user named in
``DAG_GRANTS`` may reach only those DAGs. The api-server loads it through ``[core] auth_manager``."""

from __future__ import annotations

from airflow.api_fastapi.auth.managers.simple.simple_auth_manager import SimpleAuthManager

DAG_GRANTS = {"cdf_viewer": {"delta_cdf_to_delta"}}


class DagGrantsAuthManager(SimpleAuthManager):
    def is_authorized_dag(self, *, method, user, access_entity=None, details=None) -> bool:
        granted = DAG_GRANTS.get(user.get_name())
        if granted is not None and details is not None and details.id is not None and details.id not in granted:
            return False
        return super().is_authorized_dag(method=method, user=user, access_entity=access_entity, details=details)
