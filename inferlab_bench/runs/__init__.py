"""Human workflows: ordinary options -> protocol requests -> stages -> saved run directories."""
