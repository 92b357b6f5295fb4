"""Conformance app: Message-API FedAvg with centralized and federated evaluation."""
